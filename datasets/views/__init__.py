"""Pages of datasets: upload and browse (``datasets``), label sets (``labels``), versions and
corrections (``versions``)."""
