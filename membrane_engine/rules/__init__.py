"""The domain's pure rules: salience, trust, selector, ranking, history, roles, policy files."""
