"""Routes of the training app: programs, runs, compare, downloads."""

from django.urls import path

from training.insight.views import (
    ablation,
    compare,
    corrections,
    downloads,
    eval_table,
    population,
    run_page,
    selection,
    traces,
)
from training.programs.views import endpoints, program_versions, programs
from training.runs.views import (
    branching,
    budget,
    candidate_versions,
    forecast,
    hand_candidates,
    home,
    promote,
    run_management,
    runs,
)

app_name = "training"

urlpatterns = [
    path("", home.dashboard, name="home"),
    path("programs/", programs.program_list, name="program-list"),
    path("programs/new/", programs.program_create, name="program-create"),
    path("programs/import/", programs.program_import, name="program-import"),
    path("programs/<int:pk>/", programs.program_detail, name="program-detail"),
    path("programs/<int:pk>/export.json", programs.program_export, name="program-export"),
    path("programs/<int:pk>/delete/", run_management.program_delete, name="program-delete"),
    path(
        "programs/<int:pk>/versions/diff/",
        program_versions.version_diff,
        name="program-version-diff",
    ),
    path("endpoints/", endpoints.endpoint_list, name="endpoints"),
    path("endpoints/new/", endpoints.endpoint_create, name="endpoint-create"),
    path("endpoints/<int:pk>/delete/", endpoints.endpoint_delete, name="endpoint-delete"),
    path("endpoints/<int:pk>/test/", endpoints.endpoint_test, name="endpoint-test"),
    path("runs/", runs.run_list, name="run-list"),
    path("runs/bulk/", run_management.runs_bulk, name="runs-bulk"),
    path("runs/<int:pk>/details/", run_management.run_details, name="run-details"),
    path("runs/<int:pk>/archive/", run_management.run_archive, name="run-archive"),
    path("runs/<int:pk>/delete/", run_management.run_delete, name="run-delete"),
    path("runs/<int:pk>/promote/", promote.run_promote, name="run-promote"),
    path("runs/new/", runs.run_create, name="run-create"),
    path("runs/new/forecast/", forecast.run_forecast, name="run-forecast"),
    path("programs/<int:pk>/quick-try/", home.quick_try_launch, name="quick-try"),
    path(
        "programs/<int:pk>/quick-try/forecast/",
        home.quick_try_forecast,
        name="quick-try-forecast",
    ),
    path("runs/<int:pk>/", run_page.run_detail, name="run-detail"),
    path("runs/<int:pk>/poll/", run_page.run_poll, name="run-poll"),
    path("runs/<int:pk>/cancel/", run_page.run_cancel, name="run-cancel"),
    path("runs/<int:pk>/pause/", run_page.run_pause, name="run-pause"),
    path("runs/<int:pk>/resume/", runs.run_resume, name="run-resume"),
    path("runs/<int:pk>/resume-budget/", budget.run_resume_budget, name="run-resume-budget"),
    path(
        "runs/<int:pk>/candidates/<int:candidate_pk>/",
        run_page.candidate_detail,
        name="candidate-detail",
    ),
    path("runs/<int:pk>/candidates/", traces.candidate_list, name="candidate-list"),
    path(
        "runs/<int:pk>/candidates/<int:candidate_pk>/by-hand/",
        hand_candidates.hand_candidate,
        name="hand-candidate",
    ),
    path("runs/<int:pk>/branch/", branching.branch_create, name="run-branch"),
    path("runs/<int:pk>/corrections/", corrections.run_corrections, name="run-corrections"),
    path(
        "runs/<int:pk>/candidates/<int:candidate_pk>/branch/",
        branching.branch_create,
        name="candidate-branch",
    ),
    path(
        "runs/<int:pk>/population/embed/",
        population.run_population_embed,
        name="run-population-embed",
    ),
    path("runs/<int:pk>/selection/", selection.run_selection, name="run-selection"),
    path("runs/<int:pk>/ablation/", ablation.run_ablation, name="run-ablation"),
    path(
        "runs/<int:pk>/candidates/<int:candidate_pk>/use/",
        candidate_versions.candidate_use,
        name="candidate-use",
    ),
    path("runs/<int:pk>/traces/", traces.trace_list, name="trace-list"),
    path("runs/<int:pk>/traces/<int:trace_pk>/", traces.trace_detail, name="trace-detail"),
    path("runs/<int:pk>/examples/", eval_table.eval_table, name="eval-table"),
    path("runs/<int:pk>/examples.csv", eval_table.eval_table_csv, name="eval-table-csv"),
    path(
        "runs/<int:pk>/examples/<int:index>/correction/",
        corrections.eval_correction,
        name="eval-correction",
    ),
    path("runs/<int:pk>/examples/pending/", corrections.eval_pending, name="eval-pending"),
    path("runs/<int:pk>/rescore/", corrections.run_rescore, name="run-rescore"),
    path("runs/<int:pk>/program.json", downloads.run_program_json, name="run-program-json"),
    path("runs/<int:pk>/history.csv", downloads.run_history_csv, name="run-history-csv"),
    path("runs/<int:pk>/plots/<str:kind>.png", downloads.run_plot, name="run-plot"),
    path("compare/", compare.compare, name="compare"),
]
