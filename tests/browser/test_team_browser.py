"""In Chromium: the administrator adds a member on the Team page; the member logs in and finds
the demo and the first-run card on their home page. The page fits 1280 and 390 px.

Set ``TRAINBOARD_SCREENSHOT_DIR`` to keep the pages."""

from __future__ import annotations

import pytest
from helpers_runs import fits_the_width, screenshot

pytestmark = pytest.mark.browser


def test_an_administrator_adds_a_member_who_finds_the_demo(logged_in_page, browser):
    page = logged_in_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto("/")
    page.click("nav.mainnav >> text=Team")
    page.fill("#id_username", "new-member")
    page.fill("#id_password1", "a-new-member-password-1")
    page.fill("#id_password2", "a-new-member-password-1")
    page.click("#member-form button[type=submit]")
    assert "new-member can log in now" in page.locator(".messages").inner_text()
    row = page.locator('#members tr[data-member="new-member"]')
    assert row.locator("td").nth(1).inner_text() == "member"
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        assert fits_the_width(page), width
        screenshot(page, f"team-{width}")

    member = browser.new_context(base_url=page.url.split("/team/")[0])
    member_page = member.new_page()
    member_page.goto("/accounts/login/")
    member_page.fill("#id_username", "new-member")
    member_page.fill("#id_password", "a-new-member-password-1")
    member_page.click("button[type=submit]")
    member_page.wait_for_url(lambda url: "/accounts/login/" not in url)
    member_page.goto("/")
    assert "Demo: route support messages" in member_page.locator("#first-run").inner_text()
    assert member_page.locator("nav.mainnav >> text=Team").count() == 0
    screenshot(member_page, "member-home-1280")
    member.close()
    assert errors == []
