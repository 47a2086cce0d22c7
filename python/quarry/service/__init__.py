"""The data service: a catalog of the files under some roots, an HTTP API and a
web page over them, and a client that asks it as a local Dataset is asked.

- :mod:`quarry.service.config`: what a server is told (roots, limits, token)
  and the checks every request passes (paths kept inside the roots, tokens
  compared in constant time).
- :mod:`quarry.service.catalog`: the SQLite catalog of data files, their
  variables, indexes and reorganised copies, rescanned on demand.
- :mod:`quarry.service.answers`: the quarry work a request asks for (counts,
  ids, values, histograms), run on worker threads over cached open files.
- :mod:`quarry.service.jobs`: index builds in the background, one at a time
  per file.
- :mod:`quarry.service.fields`: a request's JSON body and its fields, checked.
- :mod:`quarry.service.openapi`: the API's OpenAPI document.
- :mod:`quarry.service.app`: the Starlette application (``quarry serve``).
- :mod:`quarry.service.client`: :func:`quarry.connect`.

Nothing here is imported by ``import quarry`` or the count path: Starlette,
uvicorn and pyarrow are imported only when serving or connecting.
"""
