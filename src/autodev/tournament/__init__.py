"""Plan and implementation tournaments: critic, revision, synthesis and Borda-counted judges (issue 5)."""
