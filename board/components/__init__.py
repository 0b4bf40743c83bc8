"""Pure figure and table builders: value objects in, Plotly figure dicts or Dash components out."""
