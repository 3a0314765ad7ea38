"""The commands of `membrane-console COMMAND` (see console.cli.COMMANDS)."""
