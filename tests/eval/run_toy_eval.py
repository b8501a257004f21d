"""Driver for the resume test: runs EvalRunner with the toy backend plugin in a subprocess.

usage: python run_toy_eval.py CONFIG_JSON OUT_DIR
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import eval_toy_backend as toy_backend  # noqa: E402

from cuda_agent.harness.evaluation.config import EvalConfig  # noqa: E402
from cuda_agent.harness.evaluation.runner import EvalRunner  # noqa: E402
from cuda_agent.plugin_manager import PluginManager  # noqa: E402

if __name__ == "__main__":
    cfg = EvalConfig.model_validate(json.loads(sys.argv[1]))
    pm = PluginManager(disable=cfg.disable, load_entrypoints=False, extra_plugins=[("toy_backend", toy_backend)])
    outcome = EvalRunner(cfg, Path(sys.argv[2]), plugin_manager=pm).run()
    print(json.dumps({"ran": outcome.ran, "already_done": outcome.already_done, "planned": outcome.planned}))
