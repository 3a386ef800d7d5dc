from django.urls import path

from datasets import views, views_labels, views_versions

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("upload/", views.upload, name="upload"),
    path("uploads/<int:pk>/", views.upload_preview, name="preview"),
    path("uploads/<int:pk>/mapping-preview/", views.mapping_preview, name="mapping-preview"),
    path("uploads/<int:pk>/create/", views.create_dataset, name="create"),
    path("uploads/<int:pk>/discard/", views.discard_upload, name="discard"),
    path("builtin/<slug:key>/import/", views.import_builtin, name="import-builtin"),
    path("<int:pk>/", views.dataset_detail, name="detail"),
    path("<int:pk>/rows/", views.dataset_rows, name="rows"),
    path("<int:pk>/download/", views.download_jsonl, name="download"),
    path("<int:pk>/original/", views.download_original, name="original"),
    path("<int:pk>/delete/", views.delete_dataset, name="delete"),
    path("<int:pk>/label-set/", views_labels.label_set, name="label-set"),
    path("<int:pk>/stratify/", views_labels.stratify, name="stratify"),
    path(
        "<int:pk>/rows/<int:row_index>/correction/",
        views_versions.correct_row,
        name="correct-row",
    ),
    path("<int:pk>/versions/publish/", views_versions.publish_version, name="publish-version"),
]
