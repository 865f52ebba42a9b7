// Response serializers: Fastify's own (fast-json-stringify), kept per schema object for the process.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler'
import type { FastifyServerOptions } from 'fastify'

type SerializerFactory = NonNullable<
  NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>['buildSerializer']
>
type Serializer = ReturnType<ReturnType<SerializerFactory>>

const buildSerializer = SerializerSelector() as SerializerFactory
/**
 * Route schemas are module constants and the shared schemas (the Problem body) are the same in every
 * app, so a serializer built for one app serves the next one in the process (a test harness).
 */
const built = new WeakMap<object, Serializer>()

export const cachedSerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = buildSerializer(externalSchemas, options)
  return (route) => {
    const key = route.schema as object
    let serializer = built.get(key)
    if (serializer === undefined) {
      serializer = compile(route)
      built.set(key, serializer)
    }
    return serializer
  }
}
