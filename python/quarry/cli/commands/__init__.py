"""One module per ``quarry`` command. Each defines ``add_parser(subparsers)``,
its options, and ``run(args) -> int``, which turns the arguments into one
library call and renders the result (:mod:`quarry.cli.render`). A module
imports at its top only what building the parser needs, so that every
command starts fast; the library comes in inside ``run``."""
