from django.contrib import admin

from training.models import Candidate, EpochLog, Evaluation, Program, Run

admin.site.register(Program)
admin.site.register(Run)
admin.site.register(EpochLog)
admin.site.register(Candidate)
admin.site.register(Evaluation)
