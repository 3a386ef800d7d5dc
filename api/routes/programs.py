"""Programs: list, read (with the data models it takes and gives), import, export."""

from __future__ import annotations

from typing import Any

from ninja import File, Form, Router, Schema
from ninja.files import UploadedFile

from api.errors import FieldError
from datasets import selectors as dataset_selectors
from training.programs import programs as program_services
from training.programs import selectors, serving

router = Router(tags=["programs"])


class ProgramOut(Schema):
    id: int
    name: str
    model: str
    dataset_id: int | None
    input_fields: list[str]
    output_fields: list[str]
    versions: int
    created: str


def program_out(program) -> dict[str, Any]:
    try:
        engine = program_services.program_from_json(program.engine_json)
        inputs = program_services.input_field_names(engine)
        outputs = program_services.output_field_names(engine)
    except program_services.ProgramError:  # e.g. an endpoint no longer allowed
        inputs, outputs = [], []
    return {
        "id": program.pk,
        "name": program.name,
        "model": program.model,
        "dataset_id": program.dataset_id,
        "input_fields": inputs,
        "output_fields": outputs,
        "versions": program.versions.count(),
        "created": program.created.isoformat(),
    }


@router.get("/", response=list[ProgramOut], summary="Your programs, newest first")
def list_programs(request):
    return [program_out(p) for p in selectors.programs_of(request.user)]


@router.get("/{int:program_id}", response=ProgramOut, summary="One of your programs")
def get_program(request, program_id: int):
    return program_out(selectors.owned_program(request.user, program_id))


@router.get(
    "/{int:program_id}/export",
    summary="The program's JSON (Program.load reads it); ?version=N for a saved version",
)
def export_program(request, program_id: int, version: int | None = None):
    program = selectors.owned_program(request.user, program_id)
    if version is None:
        return program.engine_json
    found = selectors.version_of(program, version)
    if found is None:
        raise FieldError(f"the program has no version {version}", "version", status=404)
    return found.engine_json


@router.post("/import", response={201: ProgramOut}, summary="Import a program JSON file")
def import_program(
    request,
    file: File[UploadedFile],
    name: Form[str] = "",
    dataset_id: Form[int | None] = None,
):
    """The same checks as the programs page's import form (size, schema, allowed addresses)."""
    if file.size > program_services.IMPORT_MAX_BYTES:
        limit = program_services.IMPORT_MAX_BYTES // (1024 * 1024)
        raise FieldError(f"the file is larger than {limit} MB", "file")
    try:
        document, summary = program_services.parse_import(file.read())
    except program_services.ProgramError as exc:
        raise FieldError(str(exc), "file") from None
    dataset = None
    if dataset_id is not None:
        dataset = dataset_selectors.owned_dataset(request.user, dataset_id)
    program = program_services.import_program(
        request.user, document, summary, name=name.strip()[:200], dataset=dataset
    )
    return 201, program_out(program)


PREDICT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"type": "object", "additionalProperties": True},
                "example": {"message": "My parcel never arrived."},
            }
        },
    }
}


@router.post(
    "/{int:program_id}/predict",
    summary="Serve the program: POST its inputs, get its outputs; ?version=N for a version",
    openapi_extra=PREDICT_BODY,
)
def predict(request, program_id: int, version: int | None = None):
    """The body is the program's input fields as JSON (validated against its input data
    model; at most 64 KB). Each request is recorded, its LM calls counted, and shown on the
    program's page; the per-token rate limit of the API holds."""
    program = selectors.owned_program(request.user, program_id)
    try:
        inputs = serving.parse_inputs(request.body)
        return serving.serve(
            request.user,
            program,
            version,
            inputs,
            token_id=request.auth.pk,
            token_name=request.auth.name,
        )
    except serving.ServeError as exc:
        raise FieldError(str(exc), exc.field, exc.status) from None
