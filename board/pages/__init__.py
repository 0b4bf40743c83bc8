"""One module per page: `dash.register_page`, its `layout()` and `register_callbacks(app)`; ids prefixed by page."""
