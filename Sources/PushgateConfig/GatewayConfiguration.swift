// The configuration (issue #4): placeholder until it lands.
