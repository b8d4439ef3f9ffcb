"""Statistics on frames and arrays: no SQL, no Streamlit, no I/O (bootstrap CIs, agreement, significance,
calibration, juries, rubric scoring)."""
