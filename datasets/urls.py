from django.urls import path

from datasets.views import datasets as dataset_views
from datasets.views import labels as label_views
from datasets.views import versions as version_views

app_name = "datasets"
urlpatterns = [
    path("", dataset_views.dataset_list, name="list"),
    path("upload/", dataset_views.upload, name="upload"),
    path("uploads/<int:pk>/", dataset_views.upload_preview, name="preview"),
    path(
        "uploads/<int:pk>/mapping-preview/", dataset_views.mapping_preview, name="mapping-preview"
    ),
    path("uploads/<int:pk>/create/", dataset_views.create_dataset, name="create"),
    path("uploads/<int:pk>/discard/", dataset_views.discard_upload, name="discard"),
    path("builtin/<slug:key>/import/", dataset_views.import_builtin, name="import-builtin"),
    path("<int:pk>/", dataset_views.dataset_detail, name="detail"),
    path("<int:pk>/rows/", dataset_views.dataset_rows, name="rows"),
    path("<int:pk>/download/", dataset_views.download_jsonl, name="download"),
    path("<int:pk>/original/", dataset_views.download_original, name="original"),
    path("<int:pk>/delete/", dataset_views.delete_dataset, name="delete"),
    path("<int:pk>/label-set/", label_views.label_set, name="label-set"),
    path("<int:pk>/stratify/", label_views.stratify, name="stratify"),
    path(
        "<int:pk>/rows/<int:row_index>/correction/",
        version_views.correct_row,
        name="correct-row",
    ),
    path("<int:pk>/versions/publish/", version_views.publish_version, name="publish-version"),
]
