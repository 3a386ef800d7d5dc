"""In Chromium: a member makes an API token in Settings (shown once, then listed), revokes
it after a confirmation, and the API's docs page loads its own assets under the
Content-Security-Policy with no violation or console error, at 1280 and 390 px."""

from __future__ import annotations

import pytest
from helpers_runs import screenshot
from test_content_security_policy_browser import VIOLATIONS

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1280, 390])
def test_a_token_is_made_shown_once_and_revoked_and_the_docs_load(logged_in_page, width):
    page = logged_in_page
    page.set_viewport_size({"width": width, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.add_init_script(f"({VIOLATIONS})()")
    page.goto("/settings/")
    page.fill("#token-name", f"notebook {width}")
    page.click("#api-tokens button[type=submit]")
    token = page.locator("#new-token code.token-value").inner_text()
    assert token.startswith("tb_")
    screenshot(page, f"api-token-{width}")
    page.goto("/settings/")
    assert page.locator("#new-token").count() == 0  # shown once
    row = page.locator("#token-list tr", has_text=f"notebook {width}")
    asked = []  # a revoke asks first, naming the token
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    row.locator("button", has_text="Revoke").click()
    page.wait_for_url("**/settings/#api-tokens")
    assert len(asked) == 1 and f"notebook {width}" in asked[0], asked
    assert page.locator("#token-list tr", has_text=f"notebook {width}").count() == 0
    page.goto("/api/docs")
    page.locator(".swagger-ui .info .title", has_text="Trainboard API").wait_for()
    page.locator(".opblock-summary-path", has_text="/api/runs/").first.wait_for()
    screenshot(page, f"api-docs-{width}", full_page=False)
    assert page.evaluate("() => window.__violations") == []
    assert errors == []
