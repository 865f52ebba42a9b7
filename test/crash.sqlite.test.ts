// The kill -9 crash test on SQLite (test/crash.ts); its own file so that it runs beside the other database's.
import { describeCrashTest } from './crash.js'

describeCrashTest('sqlite')
