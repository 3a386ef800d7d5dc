"""Pages of runs: the dashboard, the runs list, the launch form, management, branching."""
