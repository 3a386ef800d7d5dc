from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Connects the post_save handler that gives every new program its version 1.
        from training.engine.language_models import offline
        from training.execution import events, provider_limits
        from training.insight import live
        from training.programs import program_versions  # noqa: F401

        # The worker emits what changed on a run; insight renders and sends it (in every
        # process: web, worker, reaper), so no module of execution imports insight.
        events.listen(live)
        # Provider rate limits shared by every worker, held in the project's Redis.
        provider_limits.install()
        # The offline local/… models: a provider beside the engine, imported on first need.
        offline.register_module("trainboard_local")
