"""In Chromium against the live server: drop a file on the upload page, watch the progress
bar, see the preview, map fields and watch the stored-rows preview update, create the
dataset, see it in the list; and a file over the limit is refused in the page."""

from pathlib import Path

import pytest

#: The dataset files the datasets tests share.
FIXTURES = Path(__file__).resolve().parents[1] / "datasets" / "fixtures"

pytestmark = pytest.mark.browser

CSV = (
    "sentence,label\n"
    "The soup was cold,<b>complaint</b>\n"
    "Great service,praise\n"
    "Waited an hour,complaint\n"
    "Lovely staff,praise\n"
)


def drop_file(page, name: str, text: str) -> None:
    """Dispatch a real drop event carrying a File, as a drag from the desktop would."""
    page.evaluate(
        """([name, text]) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([text], name, {type: "text/csv"}));
            const zone = document.getElementById("dropzone");
            zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: transfer, bubbles: true}));
            zone.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer, bubbles: true}));
        }""",
        [name, text],
    )


def test_upload_map_preview_create_and_list(logged_in_page):
    page = logged_in_page
    page.goto("/datasets/upload/")
    drop_file(page, "reviews.csv", CSV)
    assert "reviews.csv" in page.locator("#chosen-file").inner_text()
    page.click("#upload-submit")
    page.wait_for_url("**/datasets/uploads/*/")

    # Preview: first rows, columns with inferred types, counts; untrusted text escaped.
    assert page.locator("#row-count").inner_text() == "4"
    assert page.locator("#duplicate-count").inner_text() == "0"
    preview = page.locator("#preview-rows")
    assert "The soup was cold" in preview.inner_text()
    assert "<b>complaint</b>" in preview.inner_text()  # shown as text, not markup
    assert preview.locator("b").count() == 0

    # The stored-rows preview (htmx partial) follows the mapping as it is edited.
    page.locator("#mapped-rows").wait_for()
    page.fill('input[name="col-0-name"]', "review")
    page.fill('input[name="col-0-description"]', "A customer's review.")
    page.fill('input[name="col-1-name"]', "kind")
    page.locator("#mapped-rows th", has_text="kind").wait_for()
    assert "review" in page.locator("#mapped-rows thead").inner_text()
    page.select_option('select[name="col-1-type"]', "int")
    page.locator("#mapping-preview-error").wait_for()
    assert (
        "cannot be field 'kind' of type int" in page.locator("#mapping-preview-error").inner_text()
    )
    page.select_option('select[name="col-1-type"]', "str")
    page.locator("#mapped-rows").wait_for()

    page.fill('input[name="name"]', "Restaurant reviews")
    page.fill('input[name="test_ratio"]', "0.25")
    page.click("#create-dataset")
    page.wait_for_url("**/datasets/*/")
    assert page.locator("#detail-row-count").inner_text() == "4"
    assert "3 train / 1 test" in page.content()
    schema = page.locator("#schema").inner_text()
    assert "review" in schema and "kind" in schema and "A customer's review." in schema

    page.goto("/datasets/")
    assert "Restaurant reviews" in page.locator("#dataset-list").inner_text()


def test_upload_progress_bar_and_limit_in_page(logged_in_page, live_stack):
    page = logged_in_page
    page.goto("/datasets/upload/")
    # Progress: a file big enough for several progress events still ends at 100%.
    big = (FIXTURES / "good.csv").read_text().splitlines()[0] + "\n"
    big += "x,1,2\n" * 200_000
    page.set_input_files(
        "#id_file", files=[{"name": "big.csv", "mimeType": "text/csv", "buffer": big.encode()}]
    )
    # Record what the progress bar shows; sessionStorage survives the page change.
    page.evaluate(
        """() => { const bar = document.getElementById("upload-progress");
            new MutationObserver(() => {
              const seen = JSON.parse(sessionStorage.getItem("progress") || "[]");
              seen.push([bar.hidden, bar.value]);
              sessionStorage.setItem("progress", JSON.stringify(seen));
            }).observe(bar, {attributes: true}); }"""
    )
    page.click("#upload-submit")
    page.wait_for_url("**/datasets/uploads/*/")
    assert page.locator("#row-count").inner_text() == "200000"
    seen = page.evaluate("JSON.parse(sessionStorage.getItem('progress') || '[]')")
    assert [False, 100] in seen  # the bar was visible and reached 100%

    # Over the limit: the page refuses before sending anything.
    page.goto("/datasets/upload/")
    limit = int(page.locator("#upload-form").get_attribute("data-max-bytes"))
    page.evaluate(
        """(size) => {
            const input = document.getElementById("id_file");
            const transfer = new DataTransfer();
            const file = new File(["x"], "huge.csv");
            Object.defineProperty(file, "size", {value: size});
            transfer.items.add(file);
            input.files = transfer.files;
        }""",
        limit + 1,
    )
    page.click("#upload-submit")
    assert "over the upload limit" in page.locator("#upload-error").inner_text()
    assert "/datasets/upload/" in page.url


#: Types into the mapping, submits "Create dataset" at once, then changes the mapping again:
#: what htmx made of that last change (true: the request was not sent).
TYPE_THEN_CREATE = """() => {
    const form = document.getElementById("mapping-form");
    const name = form.querySelector('input[name="name"]');
    name.value = "Typed at the last moment";
    name.dispatchEvent(new Event("input", {bubbles: true}));  // a preview due in 400 ms
    form.requestSubmit(document.getElementById("create-dataset"));
    let prevented = null;
    document.addEventListener("htmx:beforeRequest", (event) => {
        prevented = event.defaultPrevented;
    }, {once: true});
    form.dispatchEvent(new Event("change", {bubbles: true}));
    return prevented;
}"""


def test_a_preview_asked_for_while_create_is_sent_never_reaches_the_server(logged_in_page):
    page = logged_in_page
    answers = []
    page.on(
        "response",
        lambda response: (
            answers.append(response.status) if "/mapping-preview/" in response.url else None
        ),
    )
    errors = []
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.goto("/datasets/upload/")
    drop_file(page, "late.csv", CSV)
    page.click("#upload-submit")
    page.wait_for_url("**/datasets/uploads/*/")
    page.locator("#mapped-rows").wait_for()
    previews_before = len(answers)

    assert page.evaluate(TYPE_THEN_CREATE) is True
    page.wait_for_url("**/datasets/*/")
    assert page.locator("#detail-row-count").inner_text() == "4"
    assert answers[:previews_before] == [200] * previews_before
    assert answers[previews_before:] == []  # neither the typed one nor the last change's
    assert errors == []
