"""The console's pages, one thin script each, run by st.navigation (console/app.py): read widgets,
call the operator's view, render. A package so the import contracts cover them."""
