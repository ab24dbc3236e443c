/** objectKey and splitObjectKey, both ways; anything but one namespace and one name is refused. */
import { describe, expect, it } from 'vitest';
import { objectKey, splitObjectKey } from './object-key.js';

describe('object keys', () => {
  it('builds and splits namespace/name, both ways', () => {
    expect(objectKey('shop', 'checkout')).toBe('shop/checkout');
    expect(splitObjectKey('shop/checkout')).toEqual({ namespace: 'shop', name: 'checkout' });
    expect(splitObjectKey(objectKey('a', 'b-1'))).toEqual({ namespace: 'a', name: 'b-1' });
  });

  it('refuses anything but one namespace and one name', () => {
    for (const bad of ['', 'shop', '/checkout', 'shop/', 'shop/checkout/extra', '//'])
      expect(() => splitObjectKey(bad), bad).toThrow(/not a namespace\/name key/);
  });
});
