"""What every profile reader hands on and shares: the typed host (`model`), where a profile's
files are (`files`) and the columns, nesting and steps of op events (`events`)."""
