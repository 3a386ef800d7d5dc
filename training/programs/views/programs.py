"""Programs: list, build in the browser, import a saved JSON, show, export."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from training.programs import program_settings, selectors
from training.programs import programs as program_services
from training.programs.forms import ImportProgramForm, ProgramForm
from training.programs.views import program_versions


@require_GET
def program_list(request):
    return render(
        request,
        "training/program_list.html",
        {
            "programs": selectors.programs_of(request.user),
            "import_form": ImportProgramForm(user=request.user),
        },
    )


@require_http_methods(["GET", "POST"])
def program_create(request):
    form = ProgramForm(
        request.POST or None,
        user=request.user,
        initial={
            "dataset": request.GET.get("dataset"),
            "name": selectors.new_program_name(request.user),
        },
    )
    if request.method == "POST" and form.is_valid():
        program = program_services.create_program(
            request.user, form.cleaned_data, form.engine_program
        )
        messages.success(request, f"Program “{program.name}” created.")
        return redirect(program)
    return render(request, "training/program_form.html", {"form": form})


@require_http_methods(["GET", "POST"])
def program_import(request):
    if request.method == "GET":  # a link or a bookmark: the import form is on the list page
        return redirect(reverse("training:program-list") + "#import-form")
    form = ImportProgramForm(request.POST, request.FILES, user=request.user)
    if not form.is_valid():
        return render(
            request,
            "training/program_list.html",
            {"programs": selectors.programs_of(request.user), "import_form": form},
            status=400,
        )
    program = program_services.import_program(
        request.user,
        form.document,
        form.summary,
        name=form.cleaned_data.get("name") or "",
        dataset=form.cleaned_data.get("dataset"),
    )
    messages.success(request, f"Program “{program.name}” imported.")
    return redirect(program)


@require_GET
def program_detail(request, pk: int):
    program = selectors.owned_program(request.user, pk)
    context = {
        "program": program,
        "runs": selectors.runs_of_program(program),
        "traffic": selectors.served_traffic(program),
    }
    engine_program = None
    context.update(program_versions.version_context(request, program))
    shown = context["version"].engine_json if context["version"] else program.engine_json
    try:
        engine_program = program_services.program_from_json(shown)
    except program_services.ProgramError as exc:  # e.g. its api_base is no longer allowed
        context["problem"] = str(exc)
    else:
        context["summary"] = engine_program.summary(print_fn=None)
        context["variables"] = engine_program.get_variables()
        context["fields"] = program_settings.fields_of(engine_program)
    context["settings"] = program_settings.settings_of(program, engine_program)
    return render(request, "training/program_detail.html", context)


@require_GET
def program_export(request, pk: int):
    program = selectors.owned_program(request.user, pk)
    version = selectors.version_of(program, request.GET.get("version"))  # None: as created
    response = HttpResponse(
        json.dumps(
            version.engine_json if version else program.engine_json, indent=2, ensure_ascii=False
        ),
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="program-{program.pk}.json"'
    return response
