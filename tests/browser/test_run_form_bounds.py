"""The browser enforces the launch form's bounds exactly where the server and the engine do:
the engine's bound is the edge, one step beyond is refused before anything is sent."""

from __future__ import annotations

import pytest
from helpers_runs import open_advanced, open_launch_form

from training.engine import bounds
from training.engine.optimizers import dns, omega

pytestmark = pytest.mark.browser


def test_browser_and_engine_agree_on_each_edge(logged_in_page, live_stack):
    page = logged_in_page
    open_launch_form(page, live_stack, "Bounds", "fake/rules", "OMEGA")
    open_advanced(page)
    top = bounds.VALIDATION_SPLIT.max
    cases = [
        ("#id_validation_split", top, top + 0.01),
        ("#id_validation_split", 0.33, -0.01),  # no step: any fraction the server takes
        ("#id_omega_mutation_temperature", omega.TEMPERATURE.min, omega.TEMPERATURE.min / 2),
        ("#id_omega_population_size", dns.POPULATION_SIZE.min, dns.POPULATION_SIZE.min - 1),
        ("#id_omega_merging_rate", 1, 1.01),
        ("#id_epochs", 1000, 1001),
    ]
    for selector, allowed, refused in cases:
        page.fill(selector, str(allowed))
        assert page.locator(selector).evaluate("e => e.checkValidity()") is True, selector
        page.fill(selector, str(refused))
        assert page.locator(selector).evaluate("e => e.checkValidity()") is False, selector
