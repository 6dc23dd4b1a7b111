"""The actions (POST): retry, promote, remove, clean, pause, resume, drain."""
