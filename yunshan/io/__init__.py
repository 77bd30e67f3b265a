"""What a command leaves on disk and on the screen besides data and weights, one module per concern.

`artifacts.py` (the typed records of a run: run.json, data_report.json, results.json, yunshan_complete.json, ...,
written and read only there), `folders.py` (model and output folders checked before the work, a whole output written
beside its place and swapped in), `folder_lock.py` (one writer per output folder), `progress.py` (the progress bars
of the long phases), `html_page.py` (report.html: a Markdown report as one self-contained page).
"""
