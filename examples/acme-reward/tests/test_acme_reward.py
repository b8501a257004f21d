"""acme-reward's own tests, written the way a third-party author would, with cuda_agent.testing."""

from __future__ import annotations

import pytest

from cuda_agent.plugin_manager import PluginManager
from cuda_agent.testing import check_reward, make_result

acme_reward = pytest.importorskip("acme_reward")


def test_conforms():
    check_reward(acme_reward.AcmeBonusReward())
    check_reward(acme_reward.AcmeBonusReward(acme_reward.AcmeBonusConfig(bonus=2.0)))


def test_bonus():
    reward = acme_reward.AcmeBonusReward()
    assert reward.score(make_result("correct", 3.0, 2.5)) == 3.5
    assert reward.score(make_result("correct", 3.0, 1.5)) == 3.0


def test_loaded_through_entry_point():
    pm = PluginManager()
    info = {p.name: p for p in pm.plugins()}
    if "acme" not in info:
        pytest.skip("acme-reward is not installed (pip install -e examples/acme-reward)")
    assert info["acme"].distribution == "acme-reward"
    assert info["acme"].components == ("reward:acme_bonus",)
    assert isinstance(pm.registry.build("reward", "acme_bonus", {"bonus": 1.0}), acme_reward.AcmeBonusReward)
