"""SlotDemand: how many group slots activations take while one passivation runs."""

from __future__ import annotations

import pytest

from memoryos_actors.activation import SlotDemand


def test_no_demand_is_known_before_activations_and_passivations_are_seen() -> None:
    d = SlotDemand()
    assert d.slots_per_passivation(0.0) == 0.0
    d.activation_started(0.0)
    assert d.slots_per_passivation(1.0) == 0.0  # one activation is no rate yet


def test_demand_is_the_activation_rate_times_the_passivation_time() -> None:
    d = SlotDemand(window=64)
    for i in range(20):  # 20 activations per second
        d.activation_started(i * 0.05)
    d.passivation_took(0.5)
    assert d.slots_per_passivation(1.0) == pytest.approx(20 * 0.5)


def test_the_rate_decays_once_activations_stop() -> None:
    d = SlotDemand()
    for i in range(10):
        d.activation_started(i * 0.1)
    d.passivation_took(1.0)
    busy = d.slots_per_passivation(1.0)
    assert d.slots_per_passivation(100.0) < busy / 50


def test_passivation_time_is_a_running_mean_and_only_the_window_counts() -> None:
    d = SlotDemand(window=4, alpha=0.5)
    d.passivation_took(1.0)
    d.passivation_took(3.0)  # mean moves half way: 2.0
    for t in (0.0, 10.0, 10.5, 11.0, 11.5):  # the first start falls out of the window
        d.activation_started(t)
    assert d.slots_per_passivation(12.0) == pytest.approx(4 / 2.0 * 2.0)
