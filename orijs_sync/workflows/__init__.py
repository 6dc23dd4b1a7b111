"""The OriJS workflow layer (issue 6): multi-step workflows as flows of jobs."""
