"""Imported by curate's worker fork server only (``set_forkserver_preload``): the server, and so its workers, ends
when the curating process is killed (SIGTERM, SIGKILL), instead of living on with its workers' memory."""

from pipeline.processes import die_with_parent

die_with_parent()
