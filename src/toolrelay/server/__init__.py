"""The HTTP server: settings, the registry of live objects they describe, and the app."""
