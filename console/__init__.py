"""Membrane Console: a Streamlit app over membrane_engine (see console/app.py)."""
