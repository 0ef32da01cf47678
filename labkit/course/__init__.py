"""The course machinery: running labs, reports, exercise checks, student copies, the CLI (every lab).

It may import every other package; no other package imports it (the top-level ``labkit``
facade aside).

Modules:

- ``runner``       `labkit run`: execute labs headless with papermill, write the run report
- ``failure``      why a lab run failed: the error cell, the running cell, or papermill's exception
- ``report``       `record(key, value)`: a lab's key numbers, collected into the run report
- ``report_html``  report.html: one self-contained page per run
- ``profile``      PROFILE "auto" -> "smoke" or "full", from the chip's memory, with the reason
- ``peaks``        every lab records its peak memory per device after each cell
- ``tables``       show a list of row dicts as a table
- ``check``        exercise checks: compare an answer to a reference, with a hint
- ``exercises``    one module of self-checking exercises per lab
- ``student``      `labkit student`: student copies with solutions replaced by stubs
- ``registry``     the registry of compiled functions behind `labkit lower`
- ``lowerables``   the course's compiled functions, registered with small example shapes
- ``lowering``     `labkit lower`: lower them for TPU and CUDA on a CPU-only machine
- ``source``       where the course lives: repository, pinned ref, the labs' first cell, badges
- ``cli``          the `labkit` command
- ``gather``       `labkit gather`: many run reports -> validated, merged per chip (gathered.json)
- ``gather_html``  the gathered page: chips side by side, plots titled with their takeaway
- ``site``         the course as a static site: labs with a reference run's outputs, links, guide
"""
