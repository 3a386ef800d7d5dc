"""Sections: the run page's parts, each one entry in ``registry.SECTIONS``.

An entry (``section.Section``) says everything the page and its live stream need of a part:
its fragment's template, what it draws from, where it sits on the page, and which of a run's
event kinds change it (the worker says only what happened: ``training.execution.events``).
``throttle`` decides, per run, which of the changed sections an event sends now; the
built-in sections' contexts are in ``contexts``. ``training.insight.live`` renders and sends
them; ``run_detail.html`` draws the page from the same entries.
"""
