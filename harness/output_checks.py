"""The checks of one call: its reported time against the parent's clock, its outputs' metadata, its outputs' values.

After a call the runner describes its outputs (type, dtype, shape, device, aliasing) and re-fingerprints its
inputs; the trusted side checks those descriptions (:func:`check_metas`), then, for a checked call, has the runner
hand its outputs over, stops the runner's process tree, and asks the reference process for its verdict
(:func:`export_and_check`). A hand-over that fails because the environment refuses the 'vmm' transport is done again
through files; one that fails after 'vmm' has worked is the candidate's error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent.harness.messages import Called, ExportedOutput, OutputMeta, Violation
from cuda_agent.harness.reference_messages import Verdict
from cuda_agent.harness.runner_client import CandidateFailed
from cuda_agent.schemas.result import CheckError

if TYPE_CHECKING:
    from cuda_agent.harness.session import Session


def check_call(sess: Session, k: int, called: Called, wall_ms: float, *, check: bool) -> None:
    """Every check of one call on set ``k`` (findings go to the session)."""
    slack = sess.ctx.integrity.wall_clock_slack
    if not (called.ms >= 0) or called.ms > wall_ms / slack + 0.05:
        sess.violations.append(Violation(rule="T8.outside.wall_clock", message=f"reported {called.ms:.4f} ms for a "
                                         f"call the harness saw take {wall_ms:.4f} ms"))
    sess.violations += called.violations
    metas_ok = check_metas(sess, k, called.outputs)
    if called.input_fingerprints != sess.sets[k].fingerprints:
        sess.violations.append(Violation(rule="T5.runtime.input_mutated",
                                         message=f"forward modified its inputs (input set {k}); inputs are read-only"))
    if not metas_ok or not check or sess.violations:
        return
    mode = sess.output_mode
    verdict = export_and_check(sess, k, called.outputs, mode)
    if verdict.transport_failed:
        why = verdict.transport_failed
        if sess.ctx.transport.output_failed(why):  # the environment refuses 'vmm': files from now on, this call too
            sess.diagnostics.transport_note = f"vmm unavailable ({why[:200]}); host files used"
            verdict = export_and_check(sess, k, called.outputs, "host")
        else:  # 'vmm' works here: this candidate's buffers did not
            sess.diagnostics.transport_note = f"this candidate's device buffers could not be read: {why[:200]}"
            verdict = Verdict(errors=[CheckError(check="export", message=f"handing over the outputs failed: {why}",
                                                 input_set=k)])
    elif sess.diagnostics.transport == "vmm":
        sess.ctx.transport.output_worked()
    sess.errors += verdict.errors
    sess.violations += verdict.violations
    floors = sess.diagnostics.noise_floor
    for i, v in verdict.noise_floors.items():
        floors[i] = max(floors.get(i, 0.0), v)


def export_and_check(sess: Session, k: int, metas: list[OutputMeta], mode: str) -> Verdict:
    """Have the runner hand its last outputs over by ``mode``; the reference's verdict on them."""
    import time

    from cuda_agent.harness._vmm import close_fds

    sess.sets.ensure_in_reference(k)  # its expected outputs (made again from its seed if it was dropped)
    t = time.perf_counter()
    exported = sess.runner.export(mode)
    if exported.vmm_error and mode == "vmm":  # the runner used files for (some) outputs
        if sess.ctx.transport.vmm_confirmed:
            sess.diagnostics.transport_note = f"runner fell back to files: {exported.vmm_error[:200]}"
        elif sess.ctx.transport.output_failed(f"runner: {exported.vmm_error}"):
            sess.diagnostics.transport_note = f"vmm unavailable (runner: {exported.vmm_error[:200]}); host files used"
    misplaced = misplaced_output_files(sess.runner.exchange, exported.outputs)
    if misplaced:
        sess.violations.append(Violation(rule="T23.runtime.export_path", message=f"output(s) {misplaced} were "
                                         "handed over as files outside the exchange folder's output slots: the "
                                         "trusted side reads only <exchange>/out_<i>.bin"))
        return Verdict()
    n_vmm = sum(1 for d in exported.outputs if d is not None and d.vmm)
    fds: list[int] = []
    if n_vmm:
        try:  # the runner sends them before its reply, so they are already queued: a short wait
            fds = sess.runner.recv_fds(n_vmm, min(5.0, sess.runner.call_timeout_s))
        except ValueError as exc:
            raise CandidateFailed(f"handing over outputs failed: {exc}") from exc
    sess.diagnostics.transport = "vmm" if n_vmm else mode if mode != "vmm" else "host"
    t = sess.tick("export", t)
    sess.runner.freeze()  # the candidate cannot touch its outputs while the trusted side reads them
    try:
        return sess.reference.check(k, exported.outputs, metas, sess.ctx.tolerance_table(sess.task), fds)
    finally:
        sess.runner.thaw()
        close_fds(fds)
        sess.tick("check", t)


def misplaced_output_files(exchange: Path, outputs: list[ExportedOutput | None]) -> list[int]:
    """Positions of outputs described as a file other than their own slot, ``<exchange>/out_<i>.bin``.

    The description is the candidate process's word, and the reference opens what it names with the trusted side's
    rights: any other path would make it read a file of the candidate's choosing (and its mismatch report show the
    agent what is in it)."""
    return [i for i, d in enumerate(outputs)
            if d is not None and d.file is not None and d.file != str(Path(exchange) / f"out_{i}.bin")]


def check_metas(sess: Session, k: int, metas: list[OutputMeta]) -> bool:
    """Type/count/dtype/shape/device/alias checks on what the runner described; True = export it."""
    expected = sess.sets[k].outputs
    if len(metas) != len(expected):
        sess.errors.append(CheckError(check="count", message=f"forward returned {len(metas)} output(s), the reference "
                                      f"returns {len(expected)}", input_set=k))
        return False
    ok = True
    kind = sess.ctx.kind
    for i, (meta, e) in enumerate(zip(metas, expected)):
        if e.shape is None:
            continue
        if not meta.exact_tensor:
            sess.violations.append(Violation(rule="T11.runtime.not_a_tensor", message=f"output {i} is a {meta.type}, "
                                             "not exactly torch.Tensor (subclasses and proxies are refused)"))
            return False
        if meta.alias_input:
            sess.violations.append(Violation(rule="T19.runtime.output_aliases_input",
                                             message=f"output {i} shares memory with an input; return new memory"))
            return False
        if meta.dtype != e.dtype:
            sess.errors.append(CheckError(check="dtype", message=f"output {i}: expected dtype {e.dtype}, got "
                                          f"{meta.dtype}", input_set=k, output=i))
            ok = False
        elif list(meta.shape or []) != list(e.shape):
            sess.errors.append(CheckError(check="shape", message=f"output {i}: expected shape {e.shape}, got "
                                          f"{meta.shape}", input_set=k, output=i))
            ok = False
        elif meta.device != sess.ctx.device.split(":")[0]:
            sess.errors.append(CheckError(check="device", message=f"output {i}: expected a {kind} tensor, got one on "
                                          f"{meta.device}", input_set=k, output=i))
            ok = False
    return ok
