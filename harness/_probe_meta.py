"""The task's one-set footprint on the meta device, for the probe child (``_task_probe_child.py``), which loads this
file by path (it runs under ``python -I``: no cuda_agent import, see ``_task_probe_child._sibling``)."""


def meta_footprint(module, init_inputs, torch, task_errors) -> dict:
    """Bytes of one input set, its outputs and the model's parameters, from a run on the meta device (nothing is
    allocated: a 16 GiB KernelBench set is sized in milliseconds); 'unavailable' where the forward cannot run on
    meta (``.item()``). A model whose construction cannot (the Swin models' ``.item()`` in ``__init__``) is built
    on the CPU and moved to meta (``init: 'cpu'``): unsized, a task waits for the whole device budget."""
    init = "meta"
    try:
        try:
            with torch.device("meta"), torch.no_grad():
                model = module.Model(*init_inputs)
        except task_errors:  # noqa: BLE001 - construction only: built on the CPU, then moved to meta
            init = "cpu"
            with torch.no_grad():
                model = module.Model(*init_inputs).to("meta")
        with torch.device("meta"), torch.no_grad():
            inputs = module.get_inputs()
            result = model(*inputs)
    except task_errors as exc:  # noqa: BLE001 - any failure only means "not measurable this way" (the real run
        # then meets it again at its own step, with its own kind)
        return {"method": "unavailable", "reason": f"{type(exc).__name__}: {str(exc)[:200]}"}
    outputs = list(result) if isinstance(result, (list, tuple)) else [result]

    def nbytes(values) -> int:
        return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))

    return {
        "method": "meta",
        "input_bytes": nbytes(inputs),
        "output_bytes": nbytes(outputs),
        "param_bytes": nbytes(model.parameters()) + nbytes(model.buffers()),
        **({"init": init} if init != "meta" else {}),
    }
