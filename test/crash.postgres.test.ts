// The kill -9 crash test on the PostgreSQL server (test/crash.ts); its own file so that it runs beside the other database's.
import { describeCrashTest } from './crash.js'

describeCrashTest('postgres')
