"""Evaluation at scale: concurrent eval runner, selection modes, metrics, hidden re-verification, reports, ablations.

Layout of an eval output folder ``OUT``::

    OUT/config.json                 resolved EvalConfig, secrets redacted (resume refuses a different one)
    OUT/tasks.json                  the task list (ids, levels, code hashes, sources)
    OUT/sessions/<n>.json           one per runner session: devices, GPU-queue busy time
    OUT/episodes/<task>__seed<k>/   trajectory.jsonl + result.json (the agent loop),
                                    eval.json (this package; written last, atomically:
                                    it is the episode's done marker)

Modules: :mod:`.records` (what an episode's files say), :mod:`.selection`,
:mod:`.metrics`, :mod:`.hidden`, :mod:`.preflight` (checks before anything is
written), :mod:`.runner`, :mod:`.trusted_passes` (regrades, budget points,
hidden checks), :mod:`.scheduling`, :mod:`.resume`, :mod:`.report`,
:mod:`.report_markdown`, :mod:`.tables`, :mod:`.plots`, :mod:`.ablate`, :mod:`.cli`.
"""
