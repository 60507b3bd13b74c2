"""Alembic migrations of the SQL store, shipped in the package so an installed wheel can migrate."""
