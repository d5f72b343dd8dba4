//! Typed state handles over any [`KeyedStateStore`], encoding with the one codec.

use crate::codec;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use weir_api::state::{List, Map, Set, Value};
use weir_api::{KeyedStateStore, Result, StateDescriptor};

/// Typed handles from descriptors, for any keyed store (`&mut dyn KeyedStateStore` included).
///
/// Each call registers the descriptor (a cheap check after the first time) and borrows the store
/// for as long as the handle lives. Handles act on the store's current key and namespace.
pub trait KeyedStateExt: KeyedStateStore {
    /// A value state: one `T` per key.
    ///
    /// # Errors
    ///
    /// A schema error when the descriptor conflicts with the stored registration.
    fn value_state<T: Serialize + DeserializeOwned>(
        &mut self,
        descriptor: &StateDescriptor<Value<T>>,
    ) -> Result<ValueState<'_, T, Self>>;

    /// A map state: a map `K -> V` per key, iterated in the order of the encoded map keys.
    ///
    /// # Errors
    ///
    /// A schema error when the descriptor conflicts with the stored registration.
    fn map_state<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned>(
        &mut self,
        descriptor: &StateDescriptor<Map<K, V>>,
    ) -> Result<MapState<'_, K, V, Self>>;

    /// A list state: an ordered list of `T` per key.
    ///
    /// # Errors
    ///
    /// A schema error when the descriptor conflicts with the stored registration.
    fn list_state<T: Serialize + DeserializeOwned>(
        &mut self,
        descriptor: &StateDescriptor<List<T>>,
    ) -> Result<ListState<'_, T, Self>>;

    /// A set state: a set of `T` per key, iterated in the order of the encoded elements.
    ///
    /// # Errors
    ///
    /// A schema error when the descriptor conflicts with the stored registration.
    fn set_state<T: Serialize + DeserializeOwned>(
        &mut self,
        descriptor: &StateDescriptor<Set<T>>,
    ) -> Result<SetState<'_, T, Self>>;
}

impl<S: KeyedStateStore + ?Sized> KeyedStateExt for S {
    fn value_state<T: Serialize + DeserializeOwned>(
        &mut self,
        descriptor: &StateDescriptor<Value<T>>,
    ) -> Result<ValueState<'_, T, Self>> {
        self.register(descriptor.spec())?;
        Ok(ValueState {
            store: self,
            name: descriptor.name().to_owned(),
            marker: PhantomData,
        })
    }

    fn map_state<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned>(
        &mut self,
        descriptor: &StateDescriptor<Map<K, V>>,
    ) -> Result<MapState<'_, K, V, Self>> {
        self.register(descriptor.spec())?;
        Ok(MapState {
            store: self,
            name: descriptor.name().to_owned(),
            marker: PhantomData,
        })
    }

    fn list_state<T: Serialize + DeserializeOwned>(
        &mut self,
        descriptor: &StateDescriptor<List<T>>,
    ) -> Result<ListState<'_, T, Self>> {
        self.register(descriptor.spec())?;
        Ok(ListState {
            store: self,
            name: descriptor.name().to_owned(),
            marker: PhantomData,
        })
    }

    fn set_state<T: Serialize + DeserializeOwned>(
        &mut self,
        descriptor: &StateDescriptor<Set<T>>,
    ) -> Result<SetState<'_, T, Self>> {
        self.register(descriptor.spec())?;
        Ok(SetState {
            store: self,
            name: descriptor.name().to_owned(),
            marker: PhantomData,
        })
    }
}

fn enc<T: Serialize + ?Sized>(state: &str, value: &T) -> Result<Vec<u8>> {
    Ok(codec::encode(state, value)?)
}

fn dec<T: DeserializeOwned>(state: &str, bytes: &[u8]) -> Result<T> {
    Ok(codec::decode(state, bytes)?)
}

/// One `T` per key. Obtained from [`KeyedStateExt::value_state`].
pub struct ValueState<'a, T, S: KeyedStateStore + ?Sized = dyn KeyedStateStore> {
    store: &'a mut S,
    name: String,
    marker: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned, S: KeyedStateStore + ?Sized> ValueState<'_, T, S> {
    /// The current key's value, if any (refreshes a TTL).
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn value(&mut self) -> Result<Option<T>> {
        self.store
            .get(&self.name, &[])?
            .map(|b| dec(&self.name, &b))
            .transpose()
    }

    /// Sets the current key's value.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn update(&mut self, value: &T) -> Result<()> {
        let bytes = enc(&self.name, value)?;
        self.store.put(&self.name, &[], &bytes)
    }

    /// Removes the current key's value.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn clear(&mut self) -> Result<()> {
        self.store.remove(&self.name, &[]).map(|_| ())
    }
}

/// A map `K -> V` per key. Obtained from [`KeyedStateExt::map_state`].
pub struct MapState<'a, K, V, S: KeyedStateStore + ?Sized = dyn KeyedStateStore> {
    store: &'a mut S,
    name: String,
    marker: PhantomData<fn() -> (K, V)>,
}

impl<K: Serialize + DeserializeOwned, V: Serialize + DeserializeOwned, S: KeyedStateStore + ?Sized>
    MapState<'_, K, V, S>
{
    /// The value of one map key.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn get(&mut self, key: &K) -> Result<Option<V>> {
        let sub = enc(&self.name, key)?;
        self.store
            .get(&self.name, &sub)?
            .map(|b| dec(&self.name, &b))
            .transpose()
    }

    /// Whether a map key is present.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn contains(&mut self, key: &K) -> Result<bool> {
        let sub = enc(&self.name, key)?;
        Ok(self.store.get(&self.name, &sub)?.is_some())
    }

    /// Sets the value of one map key.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn put(&mut self, key: &K, value: &V) -> Result<()> {
        let sub = enc(&self.name, key)?;
        let bytes = enc(&self.name, value)?;
        self.store.put(&self.name, &sub, &bytes)
    }

    /// Removes one map key; returns whether it was present.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn remove(&mut self, key: &K) -> Result<bool> {
        let sub = enc(&self.name, key)?;
        self.store.remove(&self.name, &sub)
    }

    /// Every `(key, value)` of the map, in encoded-key byte order.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn entries(&mut self) -> Result<Vec<(K, V)>> {
        self.store
            .entries(&self.name)?
            .into_iter()
            .map(|(k, v)| Ok((dec(&self.name, &k)?, dec(&self.name, &v)?)))
            .collect()
    }

    /// Whether the map is empty.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn is_empty(&mut self) -> Result<bool> {
        Ok(self.store.entries(&self.name)?.is_empty())
    }

    /// Removes the whole map of the current key.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn clear(&mut self) -> Result<()> {
        self.store.clear(&self.name)
    }
}

/// An ordered list of `T` per key. Obtained from [`KeyedStateExt::list_state`].
///
/// Each element is one entry whose sub-key is its position as `u64` big-endian; positions only
/// grow, so appends never rewrite earlier elements. An append reads the current key's positions
/// to find the next one (cost linear in the list's length).
pub struct ListState<'a, T, S: KeyedStateStore + ?Sized = dyn KeyedStateStore> {
    store: &'a mut S,
    name: String,
    marker: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned, S: KeyedStateStore + ?Sized> ListState<'_, T, S> {
    /// The elements, in insertion order.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn get(&mut self) -> Result<Vec<T>> {
        self.store
            .entries(&self.name)?
            .into_iter()
            .map(|(_, v)| dec(&self.name, &v))
            .collect()
    }

    /// Appends one element.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn add(&mut self, value: &T) -> Result<()> {
        self.add_all(std::slice::from_ref(value))
    }

    /// Appends elements in order.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn add_all(&mut self, values: &[T]) -> Result<()> {
        let mut next = match self.store.entries(&self.name)?.last() {
            Some((sub, _)) => position(&self.name, sub)?.saturating_add(1),
            None => 0,
        };
        for value in values {
            let bytes = enc(&self.name, value)?;
            self.store.put(&self.name, &next.to_be_bytes(), &bytes)?;
            next = next.saturating_add(1);
        }
        Ok(())
    }

    /// Replaces the whole list.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn update(&mut self, values: &[T]) -> Result<()> {
        self.store.clear(&self.name)?;
        for (i, value) in (0u64..).zip(values) {
            let bytes = enc(&self.name, value)?;
            self.store.put(&self.name, &i.to_be_bytes(), &bytes)?;
        }
        Ok(())
    }

    /// Removes the whole list of the current key.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn clear(&mut self) -> Result<()> {
        self.store.clear(&self.name)
    }
}

fn position(state: &str, sub: &[u8]) -> Result<u64> {
    let bytes: [u8; 8] = sub.try_into().map_err(|_| {
        weir_api::Error::Internal(format!(
            "list state `{state}` has a position of {} bytes, expected 8",
            sub.len()
        ))
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// A set of `T` per key. Obtained from [`KeyedStateExt::set_state`].
pub struct SetState<'a, T, S: KeyedStateStore + ?Sized = dyn KeyedStateStore> {
    store: &'a mut S,
    name: String,
    marker: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned, S: KeyedStateStore + ?Sized> SetState<'_, T, S> {
    /// Whether `element` is in the set.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn contains(&mut self, element: &T) -> Result<bool> {
        let sub = enc(&self.name, element)?;
        Ok(self.store.get(&self.name, &sub)?.is_some())
    }

    /// Adds `element`; returns whether it was new.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn insert(&mut self, element: &T) -> Result<bool> {
        let sub = enc(&self.name, element)?;
        let new = self.store.get(&self.name, &sub)?.is_none();
        self.store.put(&self.name, &sub, &[])?;
        Ok(new)
    }

    /// Removes `element`; returns whether it was present.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn remove(&mut self, element: &T) -> Result<bool> {
        let sub = enc(&self.name, element)?;
        self.store.remove(&self.name, &sub)
    }

    /// Every element, in encoded byte order.
    ///
    /// # Errors
    ///
    /// Storage or codec errors.
    pub fn elements(&mut self) -> Result<Vec<T>> {
        self.store
            .entries(&self.name)?
            .into_iter()
            .map(|(k, _)| dec(&self.name, &k))
            .collect()
    }

    /// Removes the whole set of the current key.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn clear(&mut self) -> Result<()> {
        self.store.clear(&self.name)
    }
}
