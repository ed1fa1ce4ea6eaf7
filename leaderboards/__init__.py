"""Leaderboards built from stored runs (CSV and HTML). Not built yet: see the leaderboards issue."""
