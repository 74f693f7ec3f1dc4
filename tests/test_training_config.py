"""The trainers' shared optimisation settings: one definition, documented, and the schedule they build."""
from __future__ import annotations

import pytest
import torch

from colbench.training.config import FULL_LR, LORA_LR, TrainingConfig
from colbench.training.critic import CriticConfig
from colbench.training.trainer import PolicyConfig


def test_both_trainers_take_the_shared_fields_from_one_place_and_every_field_is_documented():
    shared = TrainingConfig.help()
    for config in (CriticConfig, PolicyConfig):
        helps = config.help()
        assert {name: helps[name] for name in shared} == shared
        assert all(text.strip() for text in helps.values()), [n for n, t in helps.items() if not t.strip()]
    assert CriticConfig().learning_rate == PolicyConfig().learning_rate == LORA_LR
    assert CriticConfig(full=True).learning_rate == FULL_LR and PolicyConfig(lr=1e-4).learning_rate == 1e-4


@pytest.mark.parametrize("config", [CriticConfig, PolicyConfig])
def test_shared_settings_are_checked(config):
    for bad in (dict(batch_size=0), dict(grad_accum=0), dict(lora_rank=0), dict(warmup_ratio=1.0)):
        with pytest.raises(ValueError):
            config(**bad)


def test_a_short_run_starts_at_its_peak_rate_a_long_one_warms_up():
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer, schedule = TrainingConfig(lr=1e-3).optimizer([param], total_steps=10)  # 3% of 10 steps: none
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    optimizer, schedule = TrainingConfig(lr=1e-3, warmup_ratio=0.1).optimizer([param], total_steps=100)
    assert optimizer.param_groups[0]["lr"] == 0.0
    rates = []
    for _ in range(100):
        optimizer.step()
        schedule.step()
        rates.append(optimizer.param_groups[0]["lr"])
    assert rates[9] == pytest.approx(1e-3) and rates[4] < rates[9] and rates[-1] == pytest.approx(0.0)


def test_optimizer_steps_count_processes_and_accumulation():
    config = TrainingConfig(batch_size=4, grad_accum=2)
    assert config.optimizer_steps(32, epochs=1) == 4  # 8 batches, 2 per step
    assert config.optimizer_steps(32, epochs=3, processes=2) == 6  # each process sees 4 batches
    assert config.optimizer_steps(1, epochs=1) == 1
