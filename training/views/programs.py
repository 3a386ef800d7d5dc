"""Programs: list, build in the browser, import a saved JSON, show, export."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from training.forms import ImportProgramForm, ProgramForm
from training.models import Program
from training.services import programs as program_services


@require_GET
def program_list(request):
    programs = Program.objects.filter(owner=request.user).select_related("dataset")
    return render(
        request,
        "training/program_list.html",
        {"programs": programs, "import_form": ImportProgramForm(user=request.user)},
    )


@require_http_methods(["GET", "POST"])
def program_create(request):
    form = ProgramForm(
        request.POST or None, user=request.user, initial={"dataset": request.GET.get("dataset")}
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        program = Program.objects.create(
            owner=request.user,
            name=data["name"],
            description=data.get("description", ""),
            dataset=data["dataset"],
            module=data["module"],
            instructions=data.get("instructions", ""),
            model=data["model"],
            api_base=data.get("api_base", ""),
            temperature=data["temperature"],
            max_tokens=data.get("max_tokens"),
            source=Program.SOURCE_FORM,
            engine_json=form.engine_program.get_config(),
        )
        messages.success(request, f"Program “{program.name}” created.")
        return redirect(program)
    return render(request, "training/program_form.html", {"form": form})


@require_POST
def program_import(request):
    form = ImportProgramForm(request.POST, request.FILES, user=request.user)
    if not form.is_valid():
        programs = Program.objects.filter(owner=request.user).select_related("dataset")
        return render(
            request,
            "training/program_list.html",
            {"programs": programs, "import_form": form},
            status=400,
        )
    summary = form.summary
    name = form.cleaned_data.get("name") or form.document.get("name") or "imported program"
    program = Program.objects.create(
        owner=request.user,
        name=name,
        description=form.document.get("description") or "",
        dataset=form.cleaned_data.get("dataset"),
        module=summary["module"],
        instructions=summary["instructions"],
        model=summary["model"],
        api_base=summary["api_base"],
        temperature=summary["temperature"],
        max_tokens=summary["max_tokens"],
        source=Program.SOURCE_IMPORT,
        engine_json=form.document,
    )
    messages.success(request, f"Program “{program.name}” imported.")
    return redirect(program)


@require_GET
def program_detail(request, pk: int):
    program = get_object_or_404(
        Program.objects.select_related("dataset"), pk=pk, owner=request.user
    )
    engine_program = program_services.program_from_json(program.engine_json)
    return render(
        request,
        "training/program_detail.html",
        {
            "program": program,
            "summary": engine_program.summary(print_fn=None),
            "variables": engine_program.get_variables(),
            "runs": program.runs.select_related("dataset").order_by("-created")[:20],
        },
    )


@require_GET
def program_export(request, pk: int):
    program = get_object_or_404(Program, pk=pk, owner=request.user)
    response = HttpResponse(
        json.dumps(program.engine_json, indent=2, ensure_ascii=False),
        content_type="application/json",
    )
    response["Content-Disposition"] = f'attachment; filename="program-{program.pk}.json"'
    return response
