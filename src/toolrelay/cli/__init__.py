"""Command-line front door (typer + rich); no loop logic lives here."""
