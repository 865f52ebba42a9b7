#!/usr/bin/env node
// The package bin: runs the compiled CLI (npm start / npm run cli build it first).
import '../dist/main.js'
