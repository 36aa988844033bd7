"""The knobs: env/defaults.env read and resolved with .env and the environment (load), then
checked before anything starts (check). Every other package reads knobs through a loaded Config.
"""
