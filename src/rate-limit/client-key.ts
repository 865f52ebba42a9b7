// The key under which a per-client limit counts a client address.
import { isIP } from 'node:net'

/**
 * An IPv4 address as it is (IPv4-mapped IPv6 included); an IPv6 address by its /64, the block one
 * subscriber is usually given, so rotating through it buys no fresh budget.
 */
export function clientKey(ip: string): string {
  if (isIP(ip) !== 6) {
    return ip
  }
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)
  if (mapped?.[1]) {
    return mapped[1]
  }
  const [head = '', tail] = ip.toLowerCase().split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`
}
