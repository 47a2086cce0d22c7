"""One module per ``quarry`` command. Each defines ``add_arguments(parser)``,
the command's options, and ``run(args) -> int``, which turns the arguments
into one library call and renders the result (:mod:`quarry.cli.render`).
:mod:`quarry.cli.main` imports only the module of the command it runs, and
a module imports at its top only what its options need; the library comes
in inside ``run``, so that every command starts fast."""
