package docs

// A code file a Markdown file links to, with a line anchor.
